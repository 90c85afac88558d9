"""tokengeo.models"""
