-- intent: SET ROLE is refused: it would change the upstream role
SET ROLE admin
