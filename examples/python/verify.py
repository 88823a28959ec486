"""Receive and verify Sluice pushes in Python with PyJWT's stock JWKS client.

    SLUICE_URL=http://127.0.0.1:8787 PORT=3000 python3 verify.py

Checks the signature against Sluice's JWKS (by kid), `aud` = the URL pushed to, `exp`, and
that the `body` claim is the SHA-256 of the exact bytes received.
"""
import base64
import hashlib
import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

import jwt  # PyJWT (Debian: python3-jwt; pip: pyjwt[crypto])

SLUICE_URL = os.environ["SLUICE_URL"]
PORT = int(os.environ.get("PORT", "3000"))
jwks = jwt.PyJWKClient(f"{SLUICE_URL}/.well-known/jwks.json")


def verify(token, url, body):
    key = jwks.get_signing_key_from_jwt(token)
    claims = jwt.decode(token, key.key, algorithms=["EdDSA", "ES256"], audience=url, leeway=30)
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    if claims["body"] != digest:
        raise ValueError("the body does not match the signed SHA-256")
    return claims


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        url = f"http://127.0.0.1:{PORT}{self.path}"  # the URL Sluice pushed to (behind a proxy: the public one)
        try:
            claims = verify(self.headers.get("Sluice-Signature", ""), url, body)
        except Exception as error:  # any failed check
            self.send_response(401)
            self.end_headers()
            self.wfile.write(f"refused: {error}".encode())
            return
        print(f"task {claims['sub']} attempt {self.headers['Sluice-Attempt']}: verified", flush=True)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps({"verified_by": "python", "task": claims["sub"]}).encode())

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    print(f"listening on {PORT}", flush=True)
    HTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
