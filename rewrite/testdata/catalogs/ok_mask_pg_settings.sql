-- intent: pg_settings is read masked: only the readable settings' rows, without their source files
-- DBeaver's settings view and connect, pgJDBC's getMaxIndexKeys: pg_settings is read
-- masked, only the rows of the readable settings, without their files.
select * from pg_catalog.pg_settings;
select * from pg_catalog.pg_settings where name = 'standard_conforming_strings';
SELECT setting FROM pg_catalog.pg_settings WHERE name = 'max_index_keys';
SELECT name, setting, sourcefile FROM pg_settings WHERE name IN ('data_directory', 'TimeZone')
