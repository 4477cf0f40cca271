"""anchorfs.core."""
