-- intent: PREPARE TRANSACTION (two-phase commit) is refused
PREPARE TRANSACTION 'x'
