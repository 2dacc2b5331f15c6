"""The revisions of simindex's own schema: frozen history, never edited once released."""
