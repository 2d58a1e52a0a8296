"""Infrastructure the applications share: the P4Runtime client (`runtime`, with `wire` for its hot paths) and
network-namespace helpers (`netns`)."""
