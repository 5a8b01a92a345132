SET search_path = evil, public
