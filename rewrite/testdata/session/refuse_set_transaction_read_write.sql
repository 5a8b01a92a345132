-- intent: SET TRANSACTION READ WRITE is refused: sessions are read-only
SET TRANSACTION READ WRITE
