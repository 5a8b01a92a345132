-- intent: information_schema.user_mapping_options is refused: its options may hold foreign servers' passwords
-- User-mapping options hold the passwords of foreign servers.
SELECT option_name, option_value FROM information_schema.user_mapping_options
