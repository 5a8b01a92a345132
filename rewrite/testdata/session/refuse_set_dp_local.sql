-- intent: SET LOCAL of a dp setting is refused: dp settings last for the session
SET LOCAL dp.epsilon = 5
