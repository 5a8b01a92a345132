-- intent: COPY of a table is refused with a hint to write the query (COPY (SELECT ...) TO STDOUT)
COPY orders TO STDOUT
