; frozen-network-tracks-grad (MEM012)
; Assignments of a name or `self.<attr>`; the rule checks that the value is a pretrained
; network (`from_pretrained`, `torchvision.models.*(weights=...)`, `timm.create_model(...,
; pretrained=True)`, `torch.hub.load`) and follows every use of the name.
(assignment
  left: [(identifier) (attribute)] @network
  right: (_) @value) @construction
