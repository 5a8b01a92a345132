-- intent: pg_show_all_settings() is refused: it reads every setting, while pg_settings is read masked
-- Every setting, through the function behind pg_settings.
SELECT name, setting FROM pg_catalog.pg_show_all_settings()
