-- intent: COPY FROM writes: refused as a write
COPY products FROM STDIN
