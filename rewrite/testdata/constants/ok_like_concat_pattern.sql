-- intent: a LIKE pattern computed from constants ('a' || '\') is hoisted, evaluated before the charge in both protocols and its value checked as a pattern (text or varchar only) before anything is planned
SELECT count(*) FROM orders WHERE region LIKE 'a' || '\'
