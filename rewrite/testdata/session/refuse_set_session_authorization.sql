-- intent: SET SESSION AUTHORIZATION is refused: it would change the upstream role
SET SESSION AUTHORIZATION admin
