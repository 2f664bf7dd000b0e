"""Long-term memory: episodes, facts, notes and procedures in Chroma (the only chromadb import)."""
