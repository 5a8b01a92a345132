-- intent: the upstream role cannot be read through its settings either; current_setting reads only the listed settings (dpproxy.analyst, the analyst's own name, is one)
SELECT current_setting('role')
