-- intent: a text of only comments and semicolons is an empty query, not an error
-- just a comment
 ;; /* and another */
