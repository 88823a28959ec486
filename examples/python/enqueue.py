"""Enqueue a task with Python's standard library only.

    SLUICE_URL=http://127.0.0.1:8787 SLUICE_API_KEY=sk_sluice_... python3 enqueue.py https://example.com/hook
"""
import json
import os
import sys
import urllib.error
import urllib.request


def enqueue(sluice_url, api_key, task):
    request = urllib.request.Request(
        f"{sluice_url}/v1/tasks",
        data=json.dumps(task).encode(),
        headers={"authorization": f"Bearer {api_key}", "content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request) as response:
            return json.load(response)
    except urllib.error.HTTPError as error:
        problem = json.load(error)
        raise SystemExit(f"{problem['status']} {problem['code']}: {problem['detail']}")


if __name__ == "__main__":
    task = enqueue(os.environ["SLUICE_URL"], os.environ["SLUICE_API_KEY"], {"url": sys.argv[1], "body": {"hello": "python"}})
    print(json.dumps(task))
