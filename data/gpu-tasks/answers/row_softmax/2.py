Sorry, I cannot improve this kernel any further; it is already optimal.
