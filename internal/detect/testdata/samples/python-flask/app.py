import os

import redis
from flask import Flask

app = Flask(__name__)
cache = redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379/0"))
app.secret_key = os.environ["FLASK_SECRET_KEY"]


@app.get("/")
def index():
    hits = cache.incr("hits")
    return {"hits": hits}


if __name__ == "__main__":
    app.run(debug=True)
