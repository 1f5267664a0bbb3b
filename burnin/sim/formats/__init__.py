"""Text renderers: each turns a NodeState into one real tool's output format."""
