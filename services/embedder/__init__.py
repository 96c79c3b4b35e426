"""embedder"""
