"""Publishing: push an image's tags or promote them, guarded, only once validation passed."""
