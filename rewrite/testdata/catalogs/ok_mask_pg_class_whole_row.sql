-- intent: a whole-row reference to pg_class carries the masked row estimates, not the real ones
SELECT c FROM pg_class c
