"""The labels on everything the sandbox makes, so that whatever outlives its owner can be found."""

LABEL = "rehearsal.sandbox"
"""On every container, network and image the sandbox makes."""
OWNER = "rehearsal.owner"
"""``<hostname>-<pid>``: the process that made a container or network."""
