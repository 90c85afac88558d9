"""tokengeo.data"""
