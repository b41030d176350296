document.querySelector('h1').addEventListener('click', () => alert('soon'));
