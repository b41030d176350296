import{b as t}from"./index-AjDo8QR9.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
