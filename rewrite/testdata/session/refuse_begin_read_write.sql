-- intent: BEGIN READ WRITE is refused: sessions are read-only
BEGIN READ WRITE
