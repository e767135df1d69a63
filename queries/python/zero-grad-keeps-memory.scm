; zero-grad-keeps-memory (MEM009)
; `x.zero_grad(set_to_none=...)` and `x.zero_grad(<positional>)`; the rule checks that the
; value is `False` (a literal, or a name whose only assignment is `False`).
(call
  function: (attribute
    attribute: (identifier) @_method)
  arguments: (argument_list
    (keyword_argument
      name: (identifier) @_keyword
      value: (_) @value))
  (#eq? @_method "zero_grad")
  (#eq? @_keyword "set_to_none")) @call

(call
  function: (attribute
    attribute: (identifier) @_method)
  arguments: (argument_list
    .
    [(true) (false) (identifier)] @value)
  (#eq? @_method "zero_grad")) @call
