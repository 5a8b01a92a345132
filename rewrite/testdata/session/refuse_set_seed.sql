-- intent: SET seed is refused: it could steer sampling inside the database
SET seed = 0.5
