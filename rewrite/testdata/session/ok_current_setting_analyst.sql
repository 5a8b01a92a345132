-- intent: the setting that holds the analyst's name is readable, so that the deparse of current_user is analysed again to itself; it only ever holds the reader's own name
SELECT current_setting('dpproxy.analyst')
