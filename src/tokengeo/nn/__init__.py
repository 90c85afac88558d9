"""tokengeo.nn"""
