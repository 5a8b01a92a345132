-- intent: a LIKE pattern cast to text or to varchar without a length is the literal's own text: checked as written and accepted
SELECT count(*) FROM orders WHERE region LIKE 'a%'::text AND channel LIKE '%b'::varchar
