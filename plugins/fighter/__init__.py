"""A two-fighter browser game driven over WebRTC, with a Python twin of its rules."""
