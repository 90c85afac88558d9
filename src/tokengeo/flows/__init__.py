"""tokengeo.flows"""
