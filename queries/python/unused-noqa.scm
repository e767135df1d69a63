; unused-noqa (MEM013)
; Every comment: the rule runs the query only over the comments that hold a suppression
; directive (`# noqa`, `# memlint: ignore`), which the linter found and recorded while
; suppressing the other rules' findings, and judges each directive of those comments.
(comment) @comment
