"""The daemon process: control socket, wire protocol, pid file and lifecycle."""
