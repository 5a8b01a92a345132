-- intent: SET search_path is refused: it could redirect table names
SET search_path = evil, public
