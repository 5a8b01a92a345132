-- intent: setseed() is refused: it could steer sampling inside the database
SELECT setseed(0.5)
