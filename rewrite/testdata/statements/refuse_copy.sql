-- intent: COPY of a table is the SELECT of its rows: of a private table, refused as that row-level read is
COPY orders TO STDOUT
