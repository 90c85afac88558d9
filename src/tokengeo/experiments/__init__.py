"""tokengeo.experiments"""
