"""tokengeo.probes"""
