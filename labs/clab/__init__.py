"""clab: the lab as containerlab containers (docker-sonic-vs switches, Linux servers)."""
