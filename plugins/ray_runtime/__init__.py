"""Ray for the plugins that use it: a local Ray on 127.0.0.1 started on first use, or a cluster joined."""
