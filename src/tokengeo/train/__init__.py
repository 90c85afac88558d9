"""tokengeo.train"""
