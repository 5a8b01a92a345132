-- intent: COPY is refused as a write, not a query
COPY orders TO STDOUT
