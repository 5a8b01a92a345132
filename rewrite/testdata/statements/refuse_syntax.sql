-- intent: a syntax error is reported as 42601 with PostgreSQL's message
SELEC 1
