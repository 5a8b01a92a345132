-- intent: repeat stays refused where no private table is read, though string functions were added: a few bytes of SQL ask it for up to 1 GB
SELECT length(repeat(table_name, 100000000)) FROM information_schema.tables
